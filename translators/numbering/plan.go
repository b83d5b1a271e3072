package numbering

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/callwire/callwire/sdk/event"
)

// Cache bounds: Classify remembers the classification of at most cacheEntries distinct inputs of
// at most cacheMaxInput bytes each, so a flood of distinct garbage costs at most about
// cacheEntries*cacheMaxInput bytes and only evicts.
const (
	cacheEntries  = 4096
	cacheMaxInput = 256
)

// Plan is a validated Config, pre-parsed for classifying parties. Build it with New. It is safe
// for concurrent use.
type Plan struct {
	region    string
	numbers   []string
	own       map[string]struct{}
	locations map[string][]string
	prefixes  []string // longest first
	extMax    int
	cache     *lru.Cache[string, event.Party]
}

// New validates cfg and returns its Plan, or an error listing every problem with cfg.
func New(cfg Config) (*Plan, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid numbering configuration: %w", err)
	}
	p := &Plan{
		region:    strings.ToUpper(strings.TrimSpace(cfg.DefaultCountry)),
		numbers:   append([]string(nil), cfg.Numbers...),
		own:       make(map[string]struct{}, len(cfg.Numbers)),
		locations: make(map[string][]string, len(cfg.Locations)),
		prefixes:  append([]string(nil), cfg.DialPrefixes...),
		extMax:    cfg.ExtensionMaxDigits,
	}
	if p.extMax == 0 {
		p.extMax = DefaultExtensionMaxDigits
	}
	for _, n := range cfg.Numbers {
		p.own[n] = struct{}{}
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.Locations)) {
		v := cfg.Locations[k]
		if _, ok := p.own[k]; !ok {
			p.own[k] = struct{}{}
			p.numbers = append(p.numbers, k)
		}
		v = append([]string(nil), v...)
		p.locations[k] = v[:len(v):len(v)]
	}
	sort.SliceStable(p.prefixes, func(i, j int) bool { return len(p.prefixes[i]) > len(p.prefixes[j]) })
	c, err := lru.New[string, event.Party](cacheEntries)
	if err != nil {
		return nil, fmt.Errorf("numbering cache: %w", err)
	}
	p.cache = c
	return p, nil
}

// DefaultCountry returns the region (ISO 3166-1 alpha-2, upper case) numbers without a country
// code are read in.
func (p *Plan) DefaultCountry() string { return p.region }

// Numbers returns the clinic's own numbers in E.164: those of Config.Numbers in their order, then
// those given only as keys of Config.Locations, sorted. The result must not be modified.
func (p *Plan) Numbers() []string { return p.numbers[:len(p.numbers):len(p.numbers)] }

// IsClinic reports whether number, in E.164 as Classify writes it, is one of the clinic's own
// numbers.
func (p *Plan) IsClinic(number string) bool {
	_, ok := p.own[number]
	return ok
}

// Locations returns the locations whose workstations a call to or from number (E.164, one of the
// clinic's numbers) wakes, or nil when the configuration gives none, so that the event leaves
// locations out and the documented default ["main"] applies. The result must not be modified;
// appending to it copies.
func (p *Plan) Locations(number string) []string { return p.locations[number] }

// Direction tells which way a call between from and to goes, from the parties alone: a party is
// inside the clinic when it is an extension or one of the clinic's numbers, outside when it is
// another E.164 number or anonymous. Inside to inside is internal, outside to inside inbound,
// inside to outside outbound. ok is false when the parties do not tell (an unknown party, or
// both outside as in a call forwarded through the PBX); the translator then decides from what it
// knows of the network (which side is the PBX).
func (p *Plan) Direction(from, to event.Party) (d event.Direction, ok bool) {
	f, t := p.side(from), p.side(to)
	switch {
	case f == inside && t == inside:
		return event.Internal, true
	case f == outside && t == inside:
		return event.Inbound, true
	case f == inside && t == outside:
		return event.Outbound, true
	}
	return "", false
}

type side uint8

const (
	unsure side = iota
	inside
	outside
)

func (p *Plan) side(pt event.Party) side {
	switch pt.EffectiveKind() {
	case event.KindExtension:
		return inside
	case event.KindAnonymous:
		return outside
	case event.KindE164:
		if pt.Number == "" {
			return unsure
		}
		if p.IsClinic(pt.Number) {
			return inside
		}
		return outside
	}
	return unsure
}
