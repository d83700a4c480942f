//go:build linux

package local

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// The manifest is kept in two slots, manifest.json and manifest.b.json,
// written in place by turns (an even sequence number in the first, an
// odd one in the second): a write in place is one pwrite into the page
// cache, where replacing the file (a new file and a rename) costs a
// journalled metadata change, 0.3-1.3 ms on ext4. Each slot holds its
// sequence number and the digest of the manifest, so a slot torn by a
// kill in the middle of a write is told apart, and the reader takes the
// valid slot with the higher number: the state of the last operation that
// returned. A slot never shrinks (a shorter manifest is padded with
// spaces, which JSON ignores). Neither slot is fsync'ed: a kill -9 of the
// daemon loses nothing (the page cache outlives it), a power loss may.
const (
	manifestA = "manifest.json"
	manifestB = "manifest.b.json"
	// maxManifest bounds what is read of a slot: 400 checkpoints of a
	// few agent turns each fit many times over.
	maxManifest = 16 << 20
)

// slotted is what a slot holds.
type slotted struct {
	Seq int64           `json:"seq"`
	Sum string          `json:"sum"`
	M   json.RawMessage `json:"m"`
}

// manifestSlots are the two slots' open files, the sequence number of the
// last write and each slot's length.
type manifestSlots struct {
	f   [2]*os.File
	n   [2]int64
	seq int64
}

// loadManifest reads the newest valid slot of dir into m (nothing there:
// m stays empty). A file in the format before the slots (a bare manifest)
// is taken as sequence 0.
func loadManifest(dir string, m *manifest) (seq int64, err error) {
	found := false
	var bad error
	for _, name := range []string{manifestA, manifestB} {
		p := filepath.Join(dir, name)
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("local: checkpoint manifest: %w", err)
		}
		b, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("local: checkpoint manifest: %w", err)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue // made, never written
		}
		if len(b) > maxManifest {
			bad = fmt.Errorf("local: checkpoint manifest %s is over %d bytes", p, maxManifest)
			continue
		}
		var s slotted
		var cand manifest
		if err := json.Unmarshal(b, &s); err != nil {
			bad = fmt.Errorf("local: checkpoint manifest %s: %w", p, err)
			continue
		}
		if s.M == nil { // a bare manifest, as written before the slots
			if err := json.Unmarshal(b, &cand); err != nil {
				bad = fmt.Errorf("local: checkpoint manifest %s: %w", p, err)
				continue
			}
		} else {
			h := sha256.Sum256(s.M)
			if hex.EncodeToString(h[:]) != s.Sum {
				bad = fmt.Errorf("local: checkpoint manifest %s: its digest does not match (a write cut short)", p)
				continue
			}
			if err := json.Unmarshal(s.M, &cand); err != nil {
				bad = fmt.Errorf("local: checkpoint manifest %s: %w", p, err)
				continue
			}
		}
		if !found || s.Seq > seq {
			*m, seq, found = cand, s.Seq, true
		}
	}
	if !found && bad != nil {
		return 0, fmt.Errorf("%w; fix: remove the directory %s (its checkpoints are lost)", bad, dir)
	}
	return seq, nil
}

// open opens (or makes) both slots of dir, after loadManifest said seq.
func (ms *manifestSlots) open(dir string, seq int64) error {
	for i, name := range []string{manifestA, manifestB} {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			ms.close()
			return fmt.Errorf("local: checkpoint manifest: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			ms.close()
			return fmt.Errorf("local: checkpoint manifest: %w", err)
		}
		ms.f[i], ms.n[i] = f, fi.Size()
	}
	ms.seq = seq
	return nil
}

func (ms *manifestSlots) close() {
	for i, f := range ms.f {
		if f != nil {
			f.Close()
		}
		ms.f[i] = nil
	}
}

// encode is m in a slot with sequence number seq.
func encode(m *manifest, seq int64) []byte {
	raw, _ := json.Marshal(m)
	h := sha256.Sum256(raw)
	b, _ := json.Marshal(slotted{Seq: seq, Sum: hex.EncodeToString(h[:]), M: raw})
	return append(b, '\n')
}

// write puts m in the next slot, in place.
func (ms *manifestSlots) write(m *manifest) error {
	if ms.f[0] == nil {
		return errors.New("local: checkpoint manifest: closed")
	}
	seq := ms.seq + 1
	i := seq % 2
	b := encode(m, seq)
	if pad := ms.n[i] - int64(len(b)); pad > 0 {
		b = append(b, make([]byte, pad)...)
		for k := len(b) - int(pad); k < len(b); k++ {
			b[k] = ' '
		}
	}
	if _, err := ms.f[i].WriteAt(b, 0); err != nil {
		return fmt.Errorf("local: checkpoint manifest: %w", err)
	}
	ms.n[i] = max(ms.n[i], int64(len(b)))
	ms.seq = seq
	return nil
}

// final replaces the slots by one manifest.json (a new file, renamed into
// place), for a sandbox that closes: the next start reads it as any
// slot. The slots are closed.
func (ms *manifestSlots) final(dir string, m *manifest) error {
	ms.close()
	seq := ms.seq + 2 - ms.seq%2 // even: the first slot's
	tmp := filepath.Join(dir, manifestA+".tmp")
	if err := os.WriteFile(tmp, encode(m, seq), 0o600); err != nil {
		return fmt.Errorf("local: checkpoint manifest: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, manifestA)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("local: checkpoint manifest: %w", err)
	}
	if err := os.Remove(filepath.Join(dir, manifestB)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("local: checkpoint manifest: %w", err)
	}
	ms.seq = seq
	return nil
}
