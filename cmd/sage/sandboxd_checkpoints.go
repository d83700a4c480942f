package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"strconv"

	"github.com/sage-go/sage/sagents/sandbox"
)

// checkpointBodyLimit bounds a request body of the checkpoint API.
const checkpointBodyLimit = 64 << 10

// checkpointAPI serves the sandbox's checkpoints under sage's own path
// (the AIO API has none; docs/checkpoints.md):
//
//	GET  /v1/sage/checkpoints                 200, the list, oldest first
//	POST /v1/sage/checkpoints                 201, the new checkpoint
//	POST /v1/sage/checkpoints/{id}/rollback   200, the checkpoint rolled back to
//	POST /v1/sage/turns/{turn}/rollback       200, the same, by agent turn
//	POST /v1/sage/checkpoints/{id}/fork       201, {"session","workspace"}; body {"session": "NEW"}
//
// A failure is an HTTP status with {"error", "code"}: 404 for an unknown
// checkpoint or turn, 409 while a command runs (a kernel executing, a
// shell command), a file is open for writing or a fork target is in use, 400 for bad input, 501 where checkpoints are off.
//
// Before a checkpoint, a rollback or a fork, quiet (the AIO server's
// StopIdleShells) ends the idle bash of each /v1/shell session: a live
// shell is a running command, and its directory would keep the old mount.
func checkpointAPI(h *sandbox.Sandbox, quiet func(context.Context)) http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /v1/sage/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		list, err := h.Checkpoints(r.Context())
		if err != nil {
			checkpointHTTPError(w, err)
			return
		}
		if list == nil {
			list = []sandbox.Checkpoint{}
		}
		writeJSON(w, http.StatusOK, list)
	})
	m.HandleFunc("POST /v1/sage/checkpoints", func(w http.ResponseWriter, r *http.Request) {
		quiet(r.Context())
		cp, err := h.Checkpoint(r.Context())
		if err != nil {
			checkpointHTTPError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, cp)
	})
	rollback := func(w http.ResponseWriter, r *http.Request, cp sandbox.Checkpoint) {
		quiet(r.Context())
		res, err := h.Restore(r.Context(), cp.ID)
		if err != nil {
			checkpointHTTPError(w, err)
			return
		}
		// The checkpoint, with the kernels restored and stopped.
		writeJSON(w, http.StatusOK, struct {
			sandbox.Checkpoint
			Restored []string `json:"restored,omitempty"`
			Stopped  []string `json:"stopped,omitempty"`
		}{cp, res.Restored, res.Stopped})
	}
	m.HandleFunc("POST /v1/sage/checkpoints/{id}/rollback", func(w http.ResponseWriter, r *http.Request) {
		rollback(w, r, sandbox.Checkpoint{ID: sandbox.CheckpointID(r.PathValue("id"))})
	})
	m.HandleFunc("POST /v1/sage/turns/{turn}/rollback", func(w http.ResponseWriter, r *http.Request) {
		turn, err := strconv.Atoi(r.PathValue("turn"))
		if err != nil || turn < 0 {
			httpError(w, http.StatusBadRequest, "bad_request", "turn "+strconv.Quote(r.PathValue("turn"))+" is not a turn number; want 0 (before the first turn) or more")
			return
		}
		list, err := h.Checkpoints(r.Context())
		if err != nil {
			checkpointHTTPError(w, err)
			return
		}
		cp, err := sandbox.CheckpointOfTurn(list, turn)
		if err != nil {
			checkpointHTTPError(w, err)
			return
		}
		rollback(w, r, cp)
	})
	m.HandleFunc("POST /v1/sage/checkpoints/{id}/fork", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Session string `json:"session"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, checkpointBodyLimit))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			httpError(w, http.StatusBadRequest, "bad_request", "the body is not {\"session\": \"NEW\"}: "+err.Error())
			return
		}
		dir, err := forkDir(body.Session)
		if err != nil {
			httpError(w, http.StatusBadRequest, "bad_request", "session: "+err.Error())
			return
		}
		quiet(r.Context())
		if err := h.Export(r.Context(), sandbox.CheckpointID(r.PathValue("id")), dir); err != nil {
			checkpointHTTPError(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, map[string]string{"session": body.Session, "workspace": dir})
	})
	m.HandleFunc("/v1/sage/", func(w http.ResponseWriter, r *http.Request) {
		httpError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path+" (sage's own: GET or POST /v1/sage/checkpoints, POST /v1/sage/checkpoints/ID/rollback or /fork, POST /v1/sage/turns/N/rollback)")
	})
	return m
}

// checkpointHTTPError answers err with its status and code.
func checkpointHTTPError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, sandbox.ErrUnknownTurn):
		httpError(w, http.StatusNotFound, "unknown_turn", err.Error())
	case errors.Is(err, sandbox.ErrUnknownCheckpoint):
		httpError(w, http.StatusNotFound, "unknown_checkpoint", err.Error())
	case errors.Is(err, sandbox.ErrCommandRunning):
		httpError(w, http.StatusConflict, "command_running", err.Error())
	case errors.Is(err, sandbox.ErrCheckpointBusy):
		httpError(w, http.StatusConflict, "checkpoint_busy", err.Error())
	case errors.Is(err, fs.ErrExist):
		httpError(w, http.StatusConflict, "exists", err.Error())
	case errors.Is(err, sandbox.ErrUnsupported):
		httpError(w, http.StatusNotImplemented, "unsupported", err.Error()+" (start sage sandboxd with --checkpoints)")
	default:
		httpError(w, http.StatusInternalServerError, "sandbox_error", err.Error())
	}
}

func httpError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"error": oneLine(msg), "code": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
