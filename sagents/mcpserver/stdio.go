package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport is the MCP stdio transport (newline-delimited JSON-RPC) as
// the specification asks a server to keep it, where the SDK's IOTransport
// falls short:
//
//   - a line that is not JSON is answered with a -32700 parse error, and one
//     that is JSON but no JSON-RPC message (a batch included: batching is
//     gone from 2025-06-18 on) with -32600; the session goes on (with the
//     SDK's transport one bad line ended it, and the replies in flight
//     were lost);
//   - a line longer than MaxLineBytes is answered with -32600 and skipped;
//   - after the client cancels a request (notifications/cancelled), no
//     response to it is sent: the specification says the receiver should
//     not respond (the SDK cancels the handler's context, then writes
//     whatever it returns).
//
// Writes are serialised, one message per line.
type StdioTransport struct {
	Reader io.ReadCloser
	Writer io.WriteCloser
	// MaxLineBytes bounds one incoming message; 0 means
	// DefaultMaxRequestBytes.
	MaxLineBytes int
}

var _ mcp.Transport = (*StdioTransport)(nil)

// maxCancelled bounds the request ids remembered as cancelled.
const maxCancelled = 1024

// Connect returns the connection; it is called once by the SDK.
func (t *StdioTransport) Connect(context.Context) (mcp.Connection, error) {
	max := t.MaxLineBytes
	if max <= 0 {
		max = DefaultMaxRequestBytes
	}
	c := &stdioConn{r: t.Reader, w: t.Writer, incoming: make(chan readResult), closed: make(chan struct{}),
		cancelled: map[jsonrpc.ID]bool{}}
	go c.readLoop(bufio.NewReaderSize(t.Reader, 64<<10), max)
	return c, nil
}

type readResult struct {
	msg jsonrpc.Message
	err error
}

type stdioConn struct {
	r io.ReadCloser
	w io.WriteCloser

	incoming chan readResult
	closed   chan struct{}

	wmu sync.Mutex // serialises writes

	mu        sync.Mutex
	cancelled map[jsonrpc.ID]bool
	order     []jsonrpc.ID // of cancelled, oldest first

	closeOnce sync.Once
	closeErr  error
}

func (c *stdioConn) SessionID() string { return "" }

// readLoop reads lines until the reader ends, answering those that are no
// message itself and handing the others to Read.
func (c *stdioConn) readLoop(br *bufio.Reader, max int) {
	for {
		line, tooLong, err := readLine(br, max)
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			if msg, ok := c.decode(line, tooLong, max); ok {
				select {
				case c.incoming <- readResult{msg: msg}:
				case <-c.closed:
					return
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.EOF
			}
			select {
			case c.incoming <- readResult{err: err}:
			case <-c.closed:
			}
			return
		}
	}
}

// readLine reads one line, at most max bytes of it; a longer line is
// consumed to its end and reported tooLong.
func readLine(br *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > max {
			tooLong = true
		}
		if !tooLong {
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, tooLong, err
	}
}

// decode turns a line into a message, or answers it with the JSON-RPC
// error it deserves and reports false.
func (c *stdioConn) decode(line []byte, tooLong bool, max int) (jsonrpc.Message, bool) {
	line = bytes.TrimSpace(line)
	switch {
	case tooLong:
		c.answer(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: a message of more than %d bytes", max))
		return nil, false
	case !json.Valid(line):
		c.answer(nil, jsonrpc.CodeParseError, "Parse error: the line is not JSON")
		return nil, false
	case line[0] == '[':
		c.answer(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: JSON-RPC batches are not supported (MCP 2025-06-18 and later)")
		return nil, false
	}
	var probe struct {
		ID     json.RawMessage `json:"id"`
		Method json.RawMessage `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	_ = json.Unmarshal(line, &probe)
	msg, err := jsonrpc.DecodeMessage(line)
	if err == nil && probe.Method == nil && probe.Result == nil && probe.Error == nil {
		err = errors.New("neither a method nor a result or error")
	}
	if err != nil {
		c.answer(probe.ID, jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error())
		return nil, false
	}
	if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() && req.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(req.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
				c.cancel(id)
			}
		}
	}
	return msg, true
}

// answer writes an error response with the raw id (null when it is not a
// valid id).
func (c *stdioConn) answer(rawID json.RawMessage, code int64, message string) {
	id := json.RawMessage("null")
	var v any
	if len(rawID) > 0 && json.Unmarshal(rawID, &v) == nil {
		if _, err := jsonrpc.MakeID(v); err == nil && v != nil {
			id = rawID
		}
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}{code, message}})
	if err != nil {
		return
	}
	_ = c.writeLine(b)
}

func (c *stdioConn) cancel(id jsonrpc.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelled[id] {
		return
	}
	if len(c.order) >= maxCancelled {
		delete(c.cancelled, c.order[0])
		c.order = c.order[1:]
	}
	c.cancelled[id] = true
	c.order = append(c.order, id)
}

// wasCancelled reports (and forgets) a cancelled request id.
func (c *stdioConn) wasCancelled(id jsonrpc.ID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.cancelled[id] {
		return false
	}
	delete(c.cancelled, id)
	for i, o := range c.order {
		if o == id {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
	return true
}

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-c.incoming:
		return r.msg, r.err
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if resp, ok := msg.(*jsonrpc.Response); ok && c.wasCancelled(resp.ID) {
		return nil // the client cancelled the request: it gets no response
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcpserver: encode a message: %w", err)
	}
	return c.writeLine(b)
}

func (c *stdioConn) writeLine(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.w.Write(append(b, '\n'))
	return err
}

func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.closeErr = errors.Join(c.r.Close(), c.w.Close())
	})
	return c.closeErr
}
