package main

import (
	"strings"
	"testing"

	"github.com/callwire/callwire/core/store"
)

// FuzzParseRetention: --retention-days never panics, accepts only a retention the store takes,
// and reads 0 (forever) only from "forever" or nothing.
func FuzzParseRetention(f *testing.F) {
	for _, s := range []string{"", "forever", "FOREVER", " 90 ", "1", "36500", "36501", "0", "-1", "1e3", "0x10", "９０", "90d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		days, err := parseRetention(raw)
		if err != nil {
			if !strings.Contains(err.Error(), "--retention-days") {
				t.Errorf("parseRetention(%q) error %q does not name the flag", raw, err)
			}
			return
		}
		if err := store.ValidateRetentionDays(days); err != nil {
			t.Errorf("parseRetention(%q) = %d, which the store refuses: %v", raw, days, err)
		}
		trimmed := strings.TrimSpace(raw)
		if days == 0 && trimmed != "" && !strings.EqualFold(trimmed, "forever") {
			t.Errorf("parseRetention(%q) = 0 (forever)", raw)
		}
	})
}
