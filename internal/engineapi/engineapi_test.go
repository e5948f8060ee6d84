package engineapi

import (
	"strconv"
	"strings"
	"testing"
)

func TestAdapterNames(t *testing.T) {
	if AdapterName(123) != "swerl-v000123" || AdapterName(1234567) != "swerl-v1234567" {
		t.Fatal(AdapterName(123), AdapterName(1234567))
	}
	for s, want := range map[string]int64{"swerl-v000123": 123, "Qwen/Qwen2.5:swerl-v000007": 7, "swerl-v": -1, "swerl-v12a": -1,
		"swerl-v-1": -1, "base": -1, "swerl-v+1": -1, "swerl-v99999999999999999999": -1} {
		v, ok := ParseAdapter(s)
		if (want >= 0) != ok || (ok && v != want) {
			t.Errorf("ParseAdapter(%q) = %d, %v; want %d", s, v, ok, want)
		}
	}
	for in, want := range map[string]string{"http://h:1/v1": "http://h:1", "http://h:1/v1/chat/completions?model=x": "http://h:1",
		"http://h:1/": "http://h:1", "https://h/api/v1/": "https://h/api"} {
		if got := BaseURL(in); got != want {
			t.Errorf("BaseURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseAdapter(f *testing.F) {
	for _, s := range []string{"swerl-v000123", "b:swerl-v1", "swerl-v", ":", "swerl-v٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := ParseAdapter(s)
		if ok && (v < 0 || !strings.HasSuffix(s, strconv.FormatInt(v, 10)) && !strings.Contains(s, AdapterPrefix+"0")) {
			t.Fatalf("ParseAdapter(%q) = %d", s, v)
		}
		if ok {
			if w, ok2 := ParseAdapter(AdapterName(v)); !ok2 || w != v {
				t.Fatalf("round trip of %d: %d %v", v, w, ok2)
			}
		}
	})
}

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		h, fp string
		want  int64
	}{{"3", "swerl-v9", 3}, {"", "swerl-v9", 9}, {"", "fp_x", -1}, {"x", "swerl-vx", -1}, {"-2", "", -1}} {
		if got := ParseVersion(tc.h, tc.fp); got != tc.want {
			t.Errorf("ParseVersion(%q,%q) = %d, want %d", tc.h, tc.fp, got, tc.want)
		}
	}
}
