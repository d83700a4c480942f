package benchpair

import (
	"testing"
	"time"
)

func TestMedianAndMean(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		in           []time.Duration
		median, mean time.Duration
	}{
		{nil, 0, 0},
		{[]time.Duration{3 * ms}, 3 * ms, 3 * ms},
		{[]time.Duration{9 * ms, 1 * ms, 2 * ms}, 2 * ms, 4 * ms},
		{[]time.Duration{4 * ms, 1 * ms, 2 * ms, 9 * ms}, 3 * ms, 4 * ms},
	} {
		in := append([]time.Duration(nil), tc.in...)
		if got := Median(tc.in); got != tc.median {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.median)
		}
		if got := Mean(tc.in); got != tc.mean {
			t.Errorf("Mean(%v) = %v, want %v", tc.in, got, tc.mean)
		}
		for i := range in {
			if in[i] != tc.in[i] {
				t.Fatalf("Median sorted its argument: %v", tc.in)
			}
		}
	}
}

// TestRunAlternates: baseline and candidate run the same number of
// times, in alternating order, and the ratio reported is that of their
// medians.
func TestRunAlternates(t *testing.T) {
	var order []byte
	var base, cand []time.Duration
	res := testing.Benchmark(func(b *testing.B) {
		order = order[:0]
		base, cand = Run(b, func() { order = append(order, 'b'); time.Sleep(time.Millisecond) },
			func() { order = append(order, 'c'); time.Sleep(2 * time.Millisecond) })
	})
	if len(order) < 4 || len(order)%2 != 0 {
		t.Fatalf("order %q", order)
	}
	if string(order[:4]) != "bccb" {
		t.Errorf("first iterations %q, want bccb (the order flips)", order[:4])
	}
	if len(base) != len(order)/2 || len(cand) != len(order)/2 {
		t.Errorf("%d and %d samples of %d runs", len(base), len(cand), len(order))
	}
	want := float64(Median(cand)) / float64(Median(base))
	if x := res.Extra["x-baseline"]; x != want {
		t.Errorf("x-baseline %v, want %v (the medians' ratio)", x, want)
	}
}

// TestTimedReportsWhatTheCallsMeasured: Timed's ratio is that of the
// durations the calls return, not of the time they take (the control:
// the candidate sleeps less than the baseline but reports more).
func TestTimedReportsWhatTheCallsMeasured(t *testing.T) {
	var order []byte
	res := testing.Benchmark(func(b *testing.B) {
		order = order[:0]
		Timed(b, func() time.Duration {
			order = append(order, 'b')
			time.Sleep(2 * time.Millisecond)
			return 10 * time.Millisecond
		}, func() time.Duration {
			order = append(order, 'c')
			time.Sleep(time.Millisecond)
			return 30 * time.Millisecond
		})
	})
	if len(order) < 4 || string(order[:4]) != "bccb" {
		t.Errorf("order %q, want it to start bccb", order)
	}
	if x := res.Extra["x-baseline"]; x != 3 {
		t.Errorf("x-baseline %v, want 3 (30 ms / 10 ms as the calls reported)", x)
	}
	if m := res.Extra["median-ns"]; m != float64(30*time.Millisecond) {
		t.Errorf("median-ns %v, want %v", m, float64(30*time.Millisecond))
	}
}
