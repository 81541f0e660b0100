package qshare

import (
	"strings"
	"testing"
	"time"
)

func TestMinRunTime(t *testing.T) {
	for _, c := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true},
		{"600", 10 * time.Minute, true},
		{"604800", 7 * 24 * time.Hour, true},
		{"604801", 0, false},
		{"-1", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"10m", 0, false},
		{"", 0, false},
		{" 5", 0, false},
		{"99999999999999999999", 0, false},
	} {
		got, err := MinRunTime("tags", map[string]string{TagMinRunTime: c.v})
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("MinRunTime(%q) = %v, %v; want %v, ok=%v", c.v, got, err, c.want, c.ok)
		}
		if err != nil && (ErrorCodeOf(err) != EINVALID || !strings.Contains(err.Error(), TagMinRunTime)) {
			t.Errorf("MinRunTime(%q): error %v does not name the tag as EINVALID", c.v, err)
		}
	}
	if got, err := MinRunTime("tags", map[string]string{"other": "x"}); got != 0 || err != nil {
		t.Errorf("without the tag: %v, %v; want 0, nil", got, err)
	}
	if err := ValidateShareTags("tags", map[string]string{TagMinRunTime: "x"}); err == nil {
		t.Error("ValidateShareTags accepted a bad minimum run time")
	}
}
