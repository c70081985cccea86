// A read-through cache service: GET /items/:key answers from Redis, or on a miss from
// PostgreSQL (then caches the answer for TTL_S seconds). VARIANT=naive sends every request that
// misses to the database; VARIANT=locked lets one of them fill (SET NX lock, a second look at
// the cache after taking it) while the others poll the cache. /metrics counts the database
// queries in Prometheus text format. stampede-lab measures it from outside (--service-url).
"use strict";

const crypto = require("crypto");
const express = require("express");
const Redis = require("ioredis");
const { Pool } = require("pg");

const env = process.env;
const VARIANT = env.VARIANT || "naive";
const PORT = Number(env.PORT || 8080);
const HOST = env.HOST || "127.0.0.1";
const TTL_S = Number(env.TTL_S || 60);
const DELAY_S = Number(env.ORIGIN_DELAY_MS || 20) / 1000;
const POLL_MS = Number(env.POLL_MS || 5);
const WAIT_MS = Number(env.WAIT_MS || 2000);
const LOCK_MS = Number(env.LOCK_MS || 2000);
// The origin statement, as pg_stat_statements shows it (--origin-statement).
const STATEMENT = "SELECT id, body, pg_sleep($2) FROM items WHERE id = $1";
const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

if (!["naive", "locked"].includes(VARIANT)) {
  console.error(`VARIANT=${VARIANT}: naive or locked`);
  process.exit(2);
}
if (!env.DATABASE_URL) {
  console.error("DATABASE_URL is not set (postgresql://USER@HOST:PORT/DB)");
  process.exit(2);
}

const redis = new Redis(env.REDIS_URL || "redis://127.0.0.1:6379/0");
const pool = new Pool({ connectionString: env.DATABASE_URL, max: Number(env.POOL_SIZE || 10) });
let originCalls = 0;

async function origin(key) {
  const result = await pool.query(STATEMENT, [key, DELAY_S]);
  originCalls += 1;
  const row = result.rows[0];
  return JSON.stringify(row ? { id: row.id, body: row.body } : null);
}

async function fill(key) {
  const value = await origin(key);
  await redis.set(`item:${key}`, value, "EX", TTL_S);
  return value;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function locked(key) {
  const token = crypto.randomBytes(8).toString("hex");
  if (await redis.set(`lock:item:${key}`, token, "PX", LOCK_MS, "NX")) {
    try {
      return (await redis.get(`item:${key}`)) || (await fill(key));
    } finally {
      await redis.eval(RELEASE, 1, `lock:item:${key}`, token);
    }
  }
  const deadline = Date.now() + WAIT_MS;
  while (Date.now() < deadline) {
    await sleep(POLL_MS);
    const value = await redis.get(`item:${key}`);
    if (value) return value;
  }
  throw new Error(`waited ${WAIT_MS} ms for another request's fill of ${key}`);
}

async function read(key) {
  const cached = await redis.get(`item:${key}`);
  if (cached) return cached;
  return VARIANT === "locked" ? locked(key) : fill(key);
}

const app = express();

app.get("/items/:key", async (req, res) => {
  try {
    const value = await read(req.params.key);
    if (value === "null") return res.status(404).json({ error: "no such item" });
    res.type("application/json").send(value);
  } catch (err) {
    res.status(503).json({ error: String(err.message || err) });
  }
});

app.get("/metrics", (req, res) => {
  res.type("text/plain; version=0.0.4").send(
    "# HELP origin_calls_total Queries this service sent to its origin database.\n" +
      "# TYPE origin_calls_total counter\n" +
      `origin_calls_total{service="node",variant="${VARIANT}"} ${originCalls}\n`,
  );
});

const server = app.listen(PORT, HOST, () => {
  console.log(`listening on http://${HOST}:${server.address().port} (variant ${VARIANT})`);
});

function stop() {
  server.close(() => Promise.all([pool.end(), redis.quit()]).finally(() => process.exit(0)));
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
