package auth

import (
	"fmt"
	"math"
	"sync"
	"time"

	"qshare"
)

// limiter holds a token bucket per principal (by name, so that a bucket
// outlives a reload of the file), refilled at the principal's
// Limits.RequestsPerSecond up to its burst. It is safe for concurrent use.
type limiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// allow takes one request from p's bucket at now, or returns the
// ETHROTTLED error that refuses it.
func (l *limiter) allow(p *Principal, now time.Time) error {
	rate := p.Limits.RequestsPerSecond
	if rate <= 0 {
		return nil
	}
	burst := float64(p.Limits.Burst)
	if burst <= 0 {
		burst = math.Max(1, rate)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b := l.buckets[p.Name]
	if b == nil {
		b = &bucket{tokens: burst, last: now}
		l.buckets[p.Name] = b
	}
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = math.Min(burst, b.tokens+dt*rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return nil
	}
	return qshare.Errorf(qshare.ETHROTTLED, "Rate exceeded: %s may make %s requests per second (burst %d), as its limits in the server's auth file say; retry later (the AWS SDKs retry this with backoff)",
		p.ARN, fmt.Sprint(rate), int(burst))
}
