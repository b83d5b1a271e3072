package sip

import (
	"log/slog"
	"time"

	"github.com/callwire/callwire/translators/sip/callmodel"
	"github.com/callwire/callwire/translators/sip/proxy"
	"github.com/callwire/callwire/translators/sip/tap"
)

// newMode builds the configured observer mode, handing every message it sees to offer. stats
// returns the mode's counters for the log.
func newMode(cfg Config, offer func(callmodel.Message), log *slog.Logger) (r runner, stats func() any, err error) {
	switch cfg.Mode {
	case ModeProxy:
		p, err := proxy.New(proxy.Config{Listen: cfg.Listeners, PBX: cfg.PBXAddr, Trunk: cfg.TrunkAddr, Advertise: cfg.Advertise,
			MaxTransactions: cfg.MaxTransactions, Observe: offer, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return p, func() any { return p.Stats() }, nil
	default:
		password, err := cfg.ReadHEPPassword()
		if err != nil {
			return nil, nil, err
		}
		t, err := tap.New(tap.Config{Listen: cfg.Listeners, Window: time.Duration(cfg.ReorderWindow), MaxHeld: cfg.MaxHeld, MaxConns: cfg.MaxConns, AuthKey: password, Observe: offer, Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return t, func() any { return t.Stats() }, nil
	}
}
