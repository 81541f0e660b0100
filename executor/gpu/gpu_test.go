package gpu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"qshare"
	"qshare/executor/gpu/gputest"
	"qshare/internal/serveproc"
)

func TestParseSMI(t *testing.T) {
	out := "index, uuid, name, memory.total [MiB]\n0, GPU-5c1e0000-aaaa, NVIDIA H200, 143771 MiB\n1, GPU-77, Tesla V100-SXM2-16GB, 16160 MiB\n"
	gs, err := ParseSMI([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{{0, "GPU-5c1e0000-aaaa", "NVIDIA H200", 143771}, {1, "GPU-77", "Tesla V100-SXM2-16GB", 16160}}
	if fmt.Sprint(gs) != fmt.Sprint(want) {
		t.Errorf("ParseSMI = %v, want %v", gs, want)
	}
	for _, bad := range []string{"index, uuid\nx, GPU-1\n", "index, uuid\n0\n", "index, uuid\n0, GPU-1\n1, GPU-1\n"} {
		if _, err := ParseSMI([]byte(bad)); qshare.ErrorCodeOf(err) != qshare.EINVALID {
			t.Errorf("ParseSMI(%q) = %v, want EINVALID", bad, err)
		}
	}
}

func TestDiscover(t *testing.T) {
	ctx := context.Background()
	t.Run("none on PATH", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		gs, err := Discover(ctx, nil)
		if err != nil || len(gs) != 0 {
			t.Errorf("Discover = %v, %v; want none", gs, err)
		}
		gs, err = Discover(ctx, ParseList("a, b ,c"))
		if err != nil || len(gs) != 3 || gs[1].UUID != "b" || gs[1].Index != 1 {
			t.Errorf("Discover(a,b,c) = %v, %v", gs, err)
		}
	})
	t.Run("fake nvidia-smi", func(t *testing.T) {
		gputest.FakeSMI(t, 8)
		gs, err := Discover(ctx, nil)
		if err != nil || len(gs) != 8 || gs[7].UUID != "GPU-fake-0007" || gs[7].Name != "NVIDIA H200" {
			t.Fatalf("Discover = %v, %v", gs, err)
		}
		gs, err = Discover(ctx, []string{"3", "GPU-fake-0005"})
		if err != nil || len(gs) != 2 || gs[0].UUID != "GPU-fake-0003" || gs[1].Index != 5 {
			t.Errorf("Discover(3, GPU-fake-0005) = %v, %v", gs, err)
		}
		for _, bad := range [][]string{{"9"}, {"3", "GPU-fake-0003"}, {"1", "1"}} {
			if _, err := Discover(ctx, bad); qshare.ErrorCodeOf(err) != qshare.EINVALID {
				t.Errorf("Discover(%v) = %v, want EINVALID", bad, err)
			}
		}
		if gs, err := Discover(ctx, []string{"none"}); err != nil || len(gs) != 0 {
			t.Errorf("Discover(none) = %v, %v", gs, err)
		}
	})
	t.Run("failing nvidia-smi", func(t *testing.T) {
		dir := t.TempDir()
		serveproc.WriteExecutable(filepath.Join(dir, "nvidia-smi"), []byte("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n"))
		t.Setenv("PATH", dir)
		_, err := Discover(ctx, nil)
		if err == nil || !strings.Contains(err.Error(), "--gpus") {
			t.Errorf("Discover with a failing nvidia-smi = %v, want an error that suggests --gpus", err)
		}
	})
}

func TestTable(t *testing.T) {
	b := Builtin()
	for typ, n := range map[string]int{"ml.g5.xlarge": 1, "ml.g5.12xlarge": 4, "ml.g5.48xlarge": 8, "ml.p3.2xlarge": 1, "ml.p3.16xlarge": 8, "ml.p4d.24xlarge": 8, "ml.p5.48xlarge": 8, "ml.g6.xlarge": 1, "ml.m5.xlarge": 0, "ml.c5.2xlarge": 0, "nope": 0} {
		if got := b.PerInstance(typ); got != n {
			t.Errorf("%s: %d GPUs, want %d", typ, got, n)
		}
	}
	if n := b.Need(qshare.Capacity{"ml.g5.12xlarge": 2, "ml.g5.xlarge": 3, "ml.m5.large": 4}); n != 11 {
		t.Errorf("Need = %d, want 11", n)
	}
	tb, err := ParseTable("t.yaml", []byte("instanceTypes:\n  ml.g5.xlarge: 2\n  my.box: 3\n  ml.p3.2xlarge: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tb["ml.g5.xlarge"] != 2 || tb["my.box"] != 3 || tb["ml.p3.2xlarge"] != 0 || tb["ml.g5.12xlarge"] != 4 {
		t.Errorf("merged table is wrong: %v", tb)
	}
	for _, bad := range []string{"instanceTypes:\n  x: -1\n", "instancetypes:\n  x: 1\n", "instanceTypes: [1]\n", "instanceTypes:\n  x: lots\n"} {
		if _, err := ParseTable("bad.yaml", []byte(bad)); qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "bad.yaml") {
			t.Errorf("ParseTable(%q) = %v, want an EINVALID naming the file", bad, err)
		}
	}
	if tb, err := ParseTable("empty.yaml", nil); err != nil || len(tb) != len(b) {
		t.Errorf("empty file: %v, %v", len(tb), err)
	}
	p := filepath.Join(t.TempDir(), "gpus.yaml")
	os.WriteFile(p, []byte("instanceTypes:\n  my.box: 2\n"), 0o644)
	if tb, err := LoadTable(p); err != nil || tb["my.box"] != 2 {
		t.Errorf("LoadTable = %v, %v", tb, err)
	}
	if _, err := LoadTable(p + ".missing"); err == nil {
		t.Errorf("LoadTable of a missing file succeeded")
	}
}

// TestAllocatorModel checks the allocator against a small reference model
// under random claims, releases and reclaims: no GPU is ever held by two
// attempts, a claim fails exactly when too few GPUs are free, and a release
// frees exactly the attempt's GPUs.
func TestAllocatorModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 8).Draw(t, "gpus")
		var gs []GPU
		for i := 0; i < n; i++ {
			gs = append(gs, GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i)})
		}
		a := NewAllocator(gs)
		model := map[string][]string{} // attempt -> uuids
		owner := func() map[string]string {
			m := map[string]string{}
			for at, us := range model {
				for _, u := range us {
					if o, dup := m[u]; dup {
						t.Fatalf("GPU %s held by %s and %s", u, o, at)
					}
					m[u] = at
				}
			}
			return m
		}
		ids := []string{"a", "b", "c", "d", "e"}
		t.Repeat(map[string]func(*rapid.T){
			"claim": func(t *rapid.T) {
				id := rapid.SampledFrom(ids).Draw(t, "id")
				k := rapid.IntRange(0, 9).Draw(t, "n")
				got, err := a.Claim(id, k)
				if held, ok := model[id]; ok {
					if err != nil || len(got) != len(held) {
						t.Fatalf("repeated Claim(%s) = %v, %v; want its %v", id, got, err, held)
					}
					return
				}
				free := n - len(owner())
				if k > free {
					if err == nil {
						t.Fatalf("Claim(%s, %d) succeeded with %d free", id, k, free)
					}
					return
				}
				if err != nil || len(got) != k {
					t.Fatalf("Claim(%s, %d) = %v, %v with %d free", id, k, got, err, free)
				}
				if k > 0 {
					var us []string
					for _, g := range got {
						us = append(us, g.UUID)
					}
					model[id] = us
				}
			},
			"release": func(t *rapid.T) {
				id := rapid.SampledFrom(ids).Draw(t, "id")
				a.Release(id)
				delete(model, id)
			},
			"reclaim": func(t *rapid.T) {
				id := rapid.SampledFrom(ids).Draw(t, "id")
				var want []string
				for i := 0; i < n; i++ {
					if rapid.Bool().Draw(t, fmt.Sprint("want", i)) {
						want = append(want, fmt.Sprintf("GPU-%d", i))
					}
				}
				want = append(want, "GPU-gone")
				err := a.Reclaim(id, want)
				if _, ok := model[id]; ok {
					return // already holds: no-op
				}
				own := owner()
				var got []string
				conflict := false
				for _, u := range want {
					if u == "GPU-gone" {
						continue
					}
					if _, busy := own[u]; busy {
						conflict = true
						continue
					}
					got = append(got, u)
				}
				if conflict != (err != nil) {
					t.Fatalf("Reclaim(%s, %v) = %v; conflict expected: %v", id, want, err, conflict)
				}
				if len(got) > 0 {
					model[id] = got
				}
			},
			"": func(t *rapid.T) {
				own := owner()
				if a.Free() != n-len(own) {
					t.Fatalf("Free() = %d, model says %d", a.Free(), n-len(own))
				}
				for id, us := range model {
					h := a.Held(id)
					if len(h) != len(us) {
						t.Fatalf("Held(%s) = %v, model %v", id, h, us)
					}
					for i := range h {
						if h[i].UUID != us[i] {
							t.Fatalf("Held(%s) = %v, model %v", id, h, us)
						}
					}
				}
			},
		})
	})
}
