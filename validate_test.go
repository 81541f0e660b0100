package qshare

import (
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"QS1", true}, {"gpu-pool_2", true}, {strings.Repeat("a", 128), true},
		{"", false}, {strings.Repeat("a", 129), false}, {"has space", false}, {"dot.ted", false}, {"ünï", false},
	} {
		err := ValidateName("quotaShareName", tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && ErrorCodeOf(err) != EINVALID {
			t.Errorf("ValidateName(%q): code %q, want EINVALID", tc.name, ErrorCodeOf(err))
		}
	}
}

func TestValidateCapacityLimits(t *testing.T) {
	one := []CapacityLimit{{"ml.g5.xlarge", 1}}
	if err := ValidateCapacityLimits("capacityLimits", one); err != nil {
		t.Fatal(err)
	}
	bad := map[string][]CapacityLimit{
		"empty":     nil,
		"six":       {{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}, {"e", 1}, {"f", 1}},
		"zero":      {{"ml.g5.xlarge", 0}},
		"no unit":   {{"", 1}},
		"duplicate": {{"a", 1}, {"a", 2}},
	}
	for name, ls := range bad {
		if err := ValidateCapacityLimits("capacityLimits", ls); err == nil {
			t.Errorf("%s: accepted %v", name, ls)
		} else if !strings.Contains(err.Error(), "capacityLimits") {
			t.Errorf("%s: message %q does not name the field", name, err)
		}
	}
}

func TestValidateSharing(t *testing.T) {
	if bl, err := ValidateSharing("r", StrategyLendAndBorrow, nil); err != nil || bl != -1 {
		t.Errorf("default borrowLimit = %d, %v; want -1", bl, err)
	}
	if bl, err := ValidateSharing("r", StrategyLendAndBorrow, ptr(int64(200))); err != nil || bl != 200 {
		t.Errorf("borrowLimit 200 = %d, %v", bl, err)
	}
	if _, err := ValidateSharing("r", StrategyLend, ptr(int64(0))); err == nil {
		t.Error("borrowLimit with LEND accepted")
	}
	if _, err := ValidateSharing("r", StrategyLendAndBorrow, ptr(int64(-2))); err == nil {
		t.Error("borrowLimit -2 accepted")
	}
	if _, err := ValidateSharing("r", "SHARE", nil); err == nil {
		t.Error("unknown strategy accepted")
	}
	if _, err := ValidateSharing("r", "", nil); err == nil {
		t.Error("missing strategy accepted")
	}
}

func TestValidatePriorityAndTags(t *testing.T) {
	for _, p := range []int64{-1, 10000} {
		if ValidatePriority("schedulingPriority", p) == nil {
			t.Errorf("priority %d accepted", p)
		}
	}
	for _, p := range []int64{0, 9999} {
		if err := ValidatePriority("schedulingPriority", p); err != nil {
			t.Errorf("priority %d: %v", p, err)
		}
	}
	if ValidateTags("tags", map[string]string{"": "x"}) == nil {
		t.Error("empty tag key accepted")
	}
	if ValidateTags("tags", map[string]string{"team": strings.Repeat("v", 257)}) == nil {
		t.Error("long tag value accepted")
	}
	if ValidateState("state", "ON", false) == nil || ValidateState("state", "", true) != nil {
		t.Error("ValidateState")
	}
}
