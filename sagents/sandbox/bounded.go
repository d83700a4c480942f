package sandbox

import (
	"context"
	"fmt"
	"io"
	"io/fs"
)

// FileOpener is implemented by Handles that stream a file instead of
// reading it whole (the providers built on HostFS).
type FileOpener interface {
	OpenFile(ctx context.Context, path string) (io.ReadCloser, fs.FileInfo, error)
}

// LimitedLister is implemented by Handles that list a directory in
// bounded memory and time (HostFS, the aio remote Handle).
type LimitedLister interface {
	ListDirectoryLimit(ctx context.Context, path string, max int) ([]FileInfo, bool, error)
}

// As finds the Handle behind h (through Unwrap, as WithTracing's wrapper
// has) that implements T.
func As[T any](h Handle) (T, bool) {
	for h != nil {
		if t, ok := h.(T); ok {
			return t, true
		}
		u, ok := h.(interface{ Unwrap() Handle })
		if !ok {
			break
		}
		h = u.Unwrap()
	}
	var zero T
	return zero, false
}

// OpenFile streams path from h when its provider can (FileOpener);
// otherwise the error is errors.Is(err, ErrUnsupported) and callers fall
// back to ReadFile.
func OpenFile(ctx context.Context, h Handle, path string) (io.ReadCloser, fs.FileInfo, error) {
	if o, ok := As[FileOpener](h); ok {
		return o.OpenFile(ctx, path)
	}
	return nil, nil, fmt.Errorf("sandbox: open %q for streaming: %w", path, ErrUnsupported)
}

// ListDirectoryLimit lists at most max entries of path (max <= 0 means
// DefaultMaxEntries); truncated says there were more. Providers that are
// a LimitedLister read no more than that; for the others the whole
// listing is read and then cut.
func ListDirectoryLimit(ctx context.Context, h Handle, path string, max int) ([]FileInfo, bool, error) {
	if max <= 0 {
		max = DefaultMaxEntries
	}
	if l, ok := As[LimitedLister](h); ok {
		return l.ListDirectoryLimit(ctx, path, max)
	}
	list, err := h.ListDirectory(ctx, path)
	if err != nil || len(list) <= max {
		return list, false, err
	}
	return list[:max], true, nil
}
