package llm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sage-go/sage/internal/sagehome"
)

// errStale marks a cache entry past its TTL or for another model.
var errStale = errors.New("llm: probe cache entry is stale")

func cacheDir(opts ProbeOptions) (string, error) {
	if opts.CacheDir != "" {
		return opts.CacheDir, nil
	}
	return filepath.Join(sagehome.Dir(), "cache", "llm-probes"), nil
}

// cacheKey identifies a model on a server.
func cacheKey(baseURL, model string) string {
	sum := sha256.Sum256([]byte(baseURL + "\n" + model))
	return hex.EncodeToString(sum[:16])
}

func cachePath(opts ProbeOptions, baseURL, model string) (string, error) {
	dir, err := cacheDir(opts)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, cacheKey(baseURL, model)+".json"), nil
}

func readCache(opts ProbeOptions, baseURL, model string) (*ProbeReport, error) {
	path, err := cachePath(opts, baseURL, model)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r ProbeReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("llm: probe cache %s: %w", path, err)
	}
	if r.BaseURL != baseURL || r.Model != model || opts.Now().Sub(r.CheckedAt) > opts.TTL {
		return nil, errStale
	}
	r.Cached = true
	return &r, nil
}

// writeCache stores the report atomically (temp file and rename).
func writeCache(opts ProbeOptions, r *ProbeReport) error {
	path, err := cachePath(opts, r.BaseURL, r.Model)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("llm: probe cache: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("llm: probe cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".probe-*")
	if err != nil {
		return fmt.Errorf("llm: probe cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("llm: probe cache: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("llm: probe cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("llm: probe cache: %w", err)
	}
	return nil
}
