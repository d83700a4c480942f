package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// serverMethods are the client-to-server requests the SDK's server
// handles; a request for another method is answered -32601 here.
var serverMethods = map[string]bool{
	"initialize": true, "ping": true, "tools/list": true, "tools/call": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true, "completion/complete": true,
	"logging/setLevel": true, "server/discover": true, "subscriptions/listen": true,
}

// sessionGate answers, before the SDK's streamable HTTP handler sees them,
// the POSTs the specification says how to answer and the SDK answers
// otherwise:
//
//   - a message without an Mcp-Session-Id header that is no initialize
//     request: HTTP 400 (the SDK served it in a new, uninitialised session:
//     200, and for tools/call a JSON-RPC error with code 0);
//   - a request for a method the server does not have: the JSON-RPC error
//     -32601 (the SDK answered HTTP 400 with a text body under protocol
//     versions before 2026-07-28; stdio answers -32601).
//
// Everything else, and every GET and DELETE, goes to the SDK unchanged.
type sessionGate struct {
	max  int64
	next http.Handler
}

func (g *sessionGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		g.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.max))
	r.Body.Close()
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("request body larger than %d bytes", g.max), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	msgs, ok := decodeBody(body)
	if !ok {
		g.next.ServeHTTP(w, r) // the SDK answers malformed bodies
		return
	}
	if r.Header.Get("Mcp-Session-Id") == "" && !isInitialize(msgs) {
		writeRPCError(w, http.StatusBadRequest, firstID(msgs), jsonrpc.CodeInvalidRequest,
			"Bad Request: no Mcp-Session-Id header; send initialize first and then the session id it returned")
		return
	}
	for _, m := range msgs {
		if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() && !serverMethods[req.Method] {
			writeRPCError(w, http.StatusOK, req.ID, jsonrpc.CodeMethodNotFound, "Method not found: "+req.Method)
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// decodeBody reads a POST body: one JSON-RPC message or a batch.
func decodeBody(body []byte) ([]jsonrpc.Message, bool) {
	body = bytes.TrimSpace(body)
	var raws []json.RawMessage
	if len(body) > 0 && body[0] == '[' {
		if json.Unmarshal(body, &raws) != nil {
			return nil, false
		}
	} else {
		raws = []json.RawMessage{body}
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	for _, raw := range raws {
		m, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			return nil, false
		}
		msgs = append(msgs, m)
	}
	return msgs, len(msgs) > 0
}

func isInitialize(msgs []jsonrpc.Message) bool {
	for _, m := range msgs {
		if req, ok := m.(*jsonrpc.Request); ok && req.Method == "initialize" {
			return true
		}
	}
	return false
}

func firstID(msgs []jsonrpc.Message) jsonrpc.ID {
	for _, m := range msgs {
		if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
			return req.ID
		}
	}
	return jsonrpc.ID{}
}

// writeRPCError answers with a JSON-RPC error response (id null when id is
// not a valid one).
func writeRPCError(w http.ResponseWriter, status int, id jsonrpc.ID, code int64, message string) {
	var idJSON json.RawMessage = []byte("null")
	if id.IsValid() {
		if b, err := json.Marshal(id.Raw()); err == nil {
			idJSON = b
		}
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": idJSON,
		"error": map[string]any{"code": code, "message": message}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
