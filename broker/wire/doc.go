// Package wire is the broker's connection server: it accepts connections, reads
// size-prefixed request frames (capped before anything is allocated), parses the request
// header every version shares, and hands each request to a Handler; it writes the answers in
// request order, one reader and one writer goroutine per connection, with deferred answers
// computed meanwhile (pipelining) and requests that wait on other clients answered alone.
// net/http's Server/Handler split is the model: Serve, Shutdown(ctx) and Close keep its
// contracts (docs/wire.md, "Connections").
//
// Layout: server.go (accept loop, connections, reader and writer, Shutdown and Close),
// frame.go (frames and the request header), handler.go (Handler, Request, Answer and Conn,
// the per-connection state), pipeline.go (deferred answers, answered alone).
//
// Conn is where what a connection proves about its client belongs: listener TLS and SASL
// land here, behind the same Handler.
//
// It must never import a paddock package (not even api/): what it needs from its caller it
// takes in its own terms (a net.Listener, a Handler, hooks for metrics). It knows nothing of
// what a request means — no API keys, no versions, no kmsg decoding, no cluster state — and
// a handler's failure closes only that handler's connection.
package wire
