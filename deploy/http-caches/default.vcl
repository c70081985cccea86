# Rendered by coordinator.stack.http_caches (varnish 9b7285be2386c7a0): do not edit.
vcl 4.1;

backend app0 {
    .host = "app";
    .port = "8000";
    .first_byte_timeout = 60s;
}

sub vcl_recv {
    if (req.url == "/stampede/floor") { return (synth(204)); }
    if (req.url == "/stampede/config") { return (synth(200)); }
}

sub vcl_hash {
    hash_data(req.url);
    return (lookup);
}

sub vcl_hit {
    if (obj.ttl <= 0s) {
        set req.http.X-Cache-Status = "grace";
    } else {
        set req.http.X-Cache-Status = "hit";
    }
}

sub vcl_miss { set req.http.X-Cache-Status = "miss"; }
sub vcl_pass { set req.http.X-Cache-Status = "pass"; }
sub vcl_backend_fetch { unset bereq.http.X-Cache-Status; }

sub vcl_backend_response {
    set beresp.grace = 10.000s;
    set beresp.keep = 0s;
}

sub vcl_deliver { set resp.http.X-Cache-Status = req.http.X-Cache-Status; }

sub vcl_synth {
    if (resp.status == 204) {
        return (deliver);
    }
    if (req.url == "/stampede/config") {
        set resp.http.Content-Type = "application/json";
        set resp.body = {"{"front":"varnish","generation":0,"id":"9b7285be2386c7a0","params":{"coalesce":true,"grace_s":10.0,"ignore_busy":false}}"};
        return (deliver);
    }
}
