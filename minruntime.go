package qshare

import (
	"strconv"
	"time"
)

// TagMinRunTime is the quota-share tag that sets the share's minimum run
// time before preemption, a qshare extension: an attempt of the share that
// has run less than this many seconds is not chosen as a victim, by
// cross-share reclaim or by in-share preemption, until it has run that
// long. It is an ordinary tag, so every AWS SDK and CLI sets it unchanged
// (TagResource on the share's ARN, or tags at CreateQuotaShare); absent
// means 0, no protection.
const TagMinRunTime = "qshare:minRunTimeSeconds"

// MaxMinRunTimeSeconds is the largest value TagMinRunTime may have: 7 days.
const MaxMinRunTimeSeconds = 7 * 24 * 3600

// MinRunTime returns the minimum run time that a quota share's tags set
// (TagMinRunTime), 0 when the tag is absent. A value that is not a whole
// number of seconds in 0..MaxMinRunTimeSeconds is an EINVALID error that
// names the tag, under field (e.g. "tags").
func MinRunTime(field string, tags map[string]string) (time.Duration, error) {
	v, ok := tags[TagMinRunTime]
	if !ok {
		return 0, nil
	}
	digits := len(v) > 0 && len(v) <= 7
	for i := 0; i < len(v) && digits; i++ {
		digits = v[i] >= '0' && v[i] <= '9'
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if !digits || err != nil || n > MaxMinRunTimeSeconds {
		return 0, Errorf(EINVALID, "%s value of key %s is %q: give a whole number of seconds from 0 to %d (7 days)", field, TagMinRunTime, truncate(v, 40), MaxMinRunTimeSeconds)
	}
	return time.Duration(n) * time.Second, nil
}

// ValidateShareTags checks a quota share's tags: ValidateTags, and the value
// of TagMinRunTime (see MinRunTime).
func ValidateShareTags(field string, tags map[string]string) error {
	if err := ValidateTags(field, tags); err != nil {
		return err
	}
	_, err := MinRunTime(field, tags)
	return err
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
