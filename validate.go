package qshare

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// The validation rules shared by the API, the configuration file and the
// command line. Each returns a *Error with code EINVALID whose message names
// the field and says how to fix it, or nil.

// nameRE and a length check are ^[A-Za-z0-9_-]{1,128}$ (the class is of
// single bytes): a counted repetition compiles to that many copies of the
// class, some 100 KB built at every start of the qshare binary.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ValidateName checks a resource or job name: 1 to 128 letters, digits,
// hyphens and underscores.
func ValidateName(field, name string) error {
	if name == "" {
		return Errorf(EINVALID, "%s is required", field)
	}
	if len(name) > 128 || !nameRE.MatchString(name) {
		return Errorf(EINVALID, "%s %q is not valid: use 1 to 128 letters, digits, hyphens (-) and underscores (_)", field, name)
	}
	return nil
}

// ValidatePriority checks a schedulingPriority: 0 to 9999.
func ValidatePriority(field string, p int64) error {
	if p < MinPriority || p > MaxPriority {
		return Errorf(EINVALID, "%s %d is out of range: use an integer from %d to %d (higher runs first)", field, p, MinPriority, MaxPriority)
	}
	return nil
}

// ValidateState checks an ENABLED/DISABLED state; "" is allowed when optional.
func ValidateState(field string, s State, optional bool) error {
	if s == "" && optional {
		return nil
	}
	if !s.Valid() {
		return Errorf(EINVALID, "%s %q is not valid: use ENABLED or DISABLED", field, string(s))
	}
	return nil
}

// ValidateCapacityLimits checks the capacity limits of a quota share or a
// service environment: 1 to 5 entries, each naming a distinct capacity unit
// with a maxCapacity of at least 1.
func ValidateCapacityLimits(field string, ls []CapacityLimit) error {
	if len(ls) == 0 {
		return Errorf(EINVALID, "%s is required: give 1 to %d entries of {capacityUnit, maxCapacity}", field, MaxCapacityLimits)
	}
	if len(ls) > MaxCapacityLimits {
		return Errorf(EINVALID, "%s has %d entries: at most %d are allowed, one per instance type", field, len(ls), MaxCapacityLimits)
	}
	seen := make(map[string]bool, len(ls))
	for i, l := range ls {
		f := fmt.Sprintf("%s[%d]", field, i)
		if l.CapacityUnit == "" {
			return Errorf(EINVALID, "%s.capacityUnit is required: name an instance type such as ml.g5.xlarge", f)
		}
		if seen[l.CapacityUnit] {
			return Errorf(EINVALID, "%s.capacityUnit %q appears more than once: give one entry per instance type", f, l.CapacityUnit)
		}
		seen[l.CapacityUnit] = true
		if l.MaxCapacity < 1 {
			return Errorf(EINVALID, "%s.maxCapacity %d is not valid: it must be at least 1", f, l.MaxCapacity)
		}
	}
	return nil
}

// ValidateSharing checks a resource sharing configuration and returns the
// effective borrow limit: borrowLimit is allowed only with LEND_AND_BORROW,
// must be -1 (unlimited) or more, and defaults to -1.
func ValidateSharing(field string, strategy Strategy, borrowLimit *int64) (int64, error) {
	if strategy == "" {
		return 0, Errorf(EINVALID, "%s.strategy is required: use RESERVE, LEND or LEND_AND_BORROW", field)
	}
	if !strategy.Valid() {
		return 0, Errorf(EINVALID, "%s.strategy %q is not valid: use RESERVE, LEND or LEND_AND_BORROW", field, string(strategy))
	}
	if borrowLimit == nil {
		return BorrowUnlimited, nil
	}
	if strategy != StrategyLendAndBorrow {
		return 0, Errorf(EINVALID, "%s.borrowLimit is only allowed with strategy LEND_AND_BORROW (strategy is %s): remove borrowLimit or change the strategy", field, strategy)
	}
	if *borrowLimit < BorrowUnlimited {
		return 0, Errorf(EINVALID, "%s.borrowLimit %d is not valid: use -1 for unlimited, or a percentage of maxCapacity of 0 or more", field, *borrowLimit)
	}
	return *borrowLimit, nil
}

// SystemTagPrefix begins the keys of qshare's own tags. Users can neither
// set nor remove the ones qshare itself sets, such as TagSubmittedBy; the
// settings a user gives through a tag, such as TagMinRunTime, are the
// exception (see ReservedTagKey).
const SystemTagPrefix = "qshare:"

// TagSubmittedBy is the system tag of a job that names the ARN of the
// principal that submitted it (with authentication on).
const TagSubmittedBy = SystemTagPrefix + "submittedBy"

// TagExecutor is the tag of a service environment that names the server's
// executor that runs its jobs (qshare serve --executors); absent means the
// executor named "default". A user sets it, at CreateServiceEnvironment or
// with TagResource while the environment is DISABLED and runs nothing.
const TagExecutor = SystemTagPrefix + "executor"

// TagRunAs is the system tag of a job that names the Unix user its
// processes run as: its submitter's unixUser (with authentication on).
const TagRunAs = SystemTagPrefix + "runAs"

// ReservedTagKey reports whether a tag key is one of qshare's system tags:
// it begins with SystemTagPrefix (in any case) and is not a setting that
// users give through a tag, spelled exactly (TagMinRunTime).
func ReservedTagKey(k string) bool {
	if k == TagMinRunTime || k == TagExecutor {
		return false
	}
	return len(k) >= len(SystemTagPrefix) && strings.EqualFold(k[:len(SystemTagPrefix)], SystemTagPrefix)
}

// ValidateTags checks a tag map: at most 50 tags, keys of 1 to 128
// characters that are not system tags (ReservedTagKey), values of at most 256.
func ValidateTags(field string, tags map[string]string) error {
	if len(tags) > 50 {
		return Errorf(EINVALID, "%s has %d tags: at most 50 are allowed", field, len(tags))
	}
	for k, v := range tags {
		if ReservedTagKey(k) {
			return Errorf(EINVALID, "%s key %q is not allowed: keys that begin with %s are qshare's system tags (the ones a user may set are %s and %s)", field, k, SystemTagPrefix, TagMinRunTime, TagExecutor)
		}
		if n := utf8.RuneCountInString(k); n < 1 || n > 128 {
			return Errorf(EINVALID, "%s key %q is not valid: keys have 1 to 128 characters", field, k)
		}
		if utf8.RuneCountInString(v) > 256 {
			return Errorf(EINVALID, "%s value of key %q is longer than 256 characters", field, k)
		}
	}
	return nil
}
