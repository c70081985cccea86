-- The example services' origin table: one row per item (id 1..20), read by primary key.
CREATE TABLE IF NOT EXISTS items (id integer PRIMARY KEY, body text NOT NULL);
INSERT INTO items SELECT g, 'item ' || g || ' ' || repeat('x', 200) FROM generate_series(1, 20) g
    ON CONFLICT (id) DO NOTHING;
