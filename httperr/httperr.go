// Package httperr is the one shape of toolplane's HTTP error answers, on
// every door: {"error": {code, message, field_path, retryable,
// request_id}}, Content-Type application/json. JSON rewrites the plain-text
// errors that net/http and the MCP SDK write (http.Error: the mux's 405, the
// SDK's session and transport refusals) into that shape, so a client parses
// one kind of body whatever refused it; on an MCP endpoint, a refused
// JSON-RPC request that carried an id is answered a JSON-RPC error for that
// id instead, which MCP clients show as the request's failure.
//
// Code is the one table from an answer's code to its status, so no
// handler writes a status beside a code; Classify maps toolplane's error
// vocabulary (forbidden, invalid, conflict, not found, bad cursor) onto
// it, and Fail answers any other error as the platform's logged fault.
package httperr

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// Body is the error envelope of every HTTP answer that is not a success.
type Body struct {
	Error Detail `json:"error"`
}

// Detail is what an error answer says.
type Detail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	FieldPath string `json:"field_path,omitempty"`
	Retryable bool   `json:"retryable"`
	RequestID string `json:"request_id"`
}

// RequestID answers the id an answer to r carries: the caller's
// X-Request-Id when it sent a sane one, a fresh one otherwise.
func RequestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 128 {
		return id
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// Retryable reports whether an answer of status may succeed if the same
// request is sent again later.
func Retryable(status int) bool {
	return status >= 500 || status == http.StatusConflict || status == http.StatusTooManyRequests
}

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// JSON answers next, with every plain-text error answer of next (a status
// of 400 or more written as text/plain, as http.Error writes it) rewritten
// as JSON: the envelope, its message the text, its code the status's (see
// CodeFor); headers next set (WWW-Authenticate, Allow, Retry-After, the rate
// limit's) are kept. With rpc set (an MCP endpoint), a request whose body
// is one JSON-RPC request with an id is answered a JSON-RPC error for that
// id, the envelope's detail in its data; the body is read up to maxBody
// bytes to find the id.
func JSON(next http.Handler, rpc bool, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		jw := &jsonWriter{ResponseWriter: w}
		var body *recorder
		if rpc && r.Body != nil && r.Method == http.MethodPost {
			body = &recorder{ReadCloser: r.Body, max: maxBody}
			r.Body = body
		}
		next.ServeHTTP(jw, r)
		if jw.status == 0 {
			return
		}
		detail := Detail{Code: string(CodeFor(jw.status)), Message: strings.TrimSpace(jw.text.String()), Retryable: Retryable(jw.status), RequestID: RequestID(r)}
		if detail.Message == "" {
			detail.Message = http.StatusText(jw.status)
		}
		var v any = Body{detail}
		if body != nil {
			if id := body.id(); id != nil {
				v = rpcError(id, jw.status, detail)
			}
		}
		WriteJSON(w, jw.status, v)
	})
}

// rpcErrorBody is a JSON-RPC 2.0 error answer.
type rpcErrorBody struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcErrorObject  `json:"error"`
}

type rpcErrorObject struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    Detail `json:"data"`
}

// rpcError answers the JSON-RPC error of a request id refused with status:
// Invalid Request for what the request itself got wrong, the
// implementation-defined server error otherwise; data is the envelope's
// detail, so both shapes say the same.
func rpcError(id json.RawMessage, status int, d Detail) rpcErrorBody {
	code := -32000
	if status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge {
		code = -32600
	}
	return rpcErrorBody{JSONRPC: "2.0", ID: id, Error: rpcErrorObject{Code: code, Message: d.Message, Data: d}}
}

// jsonWriter holds back a plain-text error answer for JSON to rewrite, and
// passes every other answer through untouched.
type jsonWriter struct {
	http.ResponseWriter
	// status is the held-back error's, 0 while the answer passes through.
	status  int
	text    bytes.Buffer
	written bool
}

func (j *jsonWriter) WriteHeader(code int) {
	if j.written || j.status != 0 {
		return
	}
	if code >= 400 && strings.HasPrefix(j.Header().Get("Content-Type"), "text/plain") {
		j.status = code
		j.Header().Del("Content-Type")
		return
	}
	if code >= 200 {
		// An informational answer (1xx) leaves the final one to come.
		j.written = true
	}
	j.ResponseWriter.WriteHeader(code)
}

func (j *jsonWriter) Write(b []byte) (int, error) {
	if !j.written && j.status == 0 {
		j.WriteHeader(http.StatusOK)
	}
	if j.status != 0 {
		if j.text.Len() < 4096 {
			j.text.Write(b)
		}
		return len(b), nil
	}
	return j.ResponseWriter.Write(b)
}

// Flush sends what was written so far, unless it is held back.
func (j *jsonWriter) Flush() {
	if j.status != 0 {
		return
	}
	if !j.written {
		j.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(j.ResponseWriter).Flush()
}

// Unwrap answers the writer underneath, for http.ResponseController.
func (j *jsonWriter) Unwrap() http.ResponseWriter { return j.ResponseWriter }

// recorder keeps what is read of a request body, up to max bytes, so the
// id of a refused JSON-RPC request can be found after a handler read it.
type recorder struct {
	io.ReadCloser
	max  int64
	kept bytes.Buffer
	over bool
}

func (b *recorder) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.over {
		if int64(b.kept.Len()+n) > b.max {
			b.over = true
		} else {
			b.kept.Write(p[:n])
		}
	}
	return n, err
}

// id answers the id of the one JSON-RPC request the body holds, reading
// what the handler left unread; nil for a notification, a batch, a body
// past max or not JSON.
func (b *recorder) id() json.RawMessage {
	if !b.over {
		_, _ = io.Copy(io.Discard, io.LimitReader(b, b.max+1))
	}
	if b.over {
		return nil
	}
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
	}
	if json.Unmarshal(b.kept.Bytes(), &msg) != nil || msg.JSONRPC != "2.0" {
		return nil
	}
	switch id := bytes.TrimSpace(msg.ID); {
	case len(id) == 0, bytes.Equal(id, []byte("null")):
		return nil
	case id[0] == '"', id[0] == '-', id[0] >= '0' && id[0] <= '9':
		return id
	}
	return nil
}
