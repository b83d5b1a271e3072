package store

import (
	"encoding/json"
	"time"
)

// Summary is what one write's events say toward a call's row in the call history: the columns
// the history filters and sorts on, kept up to date as events are written, in the same
// statement as the call's upsert. Every field merges into the stored value by a rule that does
// not depend on the order, lateness or repetition of writes, as the state ladder does:
//
//   - AnsweredAt and EndedAt: the stored value becomes the earliest of the stored and this one
//     (a zero time says nothing);
//   - AnsweredBy: moves with AnsweredAt (the one of the earliest answer);
//   - Flags: the stored value becomes the union (bitwise or) of the stored and these;
//   - FromKey, ToKey, FromExt, ToExt, Locations and Callback: describe the write's Block and
//     move with it (see CallWrite.Block).
type Summary struct {
	// AnsweredAt is the earliest order time of a call_answered in the write; zero for none.
	AnsweredAt time.Time
	// AnsweredBy is the answeredBy of that call_answered, "" when it named none.
	AnsweredBy string
	// EndedAt is the earliest order time of a call_ended or call_missed in the write; zero for
	// none.
	EndedAt time.Time
	// Flags are what the write's events show of the call (see Flags).
	Flags Flags
	// FromKey and ToKey are NumberKey of the block's from and to numbers, "" for none.
	FromKey, ToKey string
	// FromExt and ToExt are the block's from and to extensions, "" for none.
	FromExt, ToExt string
	// Locations is the JSON array of the locations of the block's event, with the default
	// applied; nil for none known.
	Locations json.RawMessage
	// Callback is the number the call counts toward on the to-call-back list, as
	// CallbackParty(Direction, Block) gives it; "" for none.
	Callback string
}

// Flags are facts about a call that, once reported, stay true.
type Flags int16

// The flags.
const (
	// FlagAnswered: a person took the call (call_answered, or a call_ended with disposition
	// answered, a positive talkTime or answeredElsewhere).
	FlagAnswered Flags = 1 << iota
	// FlagVoicemail: a call_ended with disposition voicemail.
	FlagVoicemail
	// FlagRecorded: a call_recorded is on file.
	FlagRecorded
	// FlagTranscribed: a call_transcribed is on file.
	FlagTranscribed
)

// Outcomes, as the history names them: what a person filters calls on.
const (
	OutcomeInProgress  = "in_progress"
	OutcomeAnswered    = "answered"
	OutcomeVoicemail   = "voicemail"
	OutcomeMissed      = "missed"
	OutcomeNotAnswered = "not_answered"
)

// Outcomes lists every outcome, in the order the history documents them.
func Outcomes() []string {
	return []string{OutcomeInProgress, OutcomeAnswered, OutcomeVoicemail, OutcomeMissed, OutcomeNotAnswered}
}

// Outcome returns the outcome of a call in state s, of direction dir, with flags f: in_progress
// until it has ended; then voicemail when it reached voicemail (even if the voicemail system
// answered), answered when a person took it, missed when it was inbound, else not_answered.
func Outcome(s State, dir string, f Flags) string {
	switch {
	case s < StateEnded:
		return OutcomeInProgress
	case f&FlagVoicemail != 0:
		return OutcomeVoicemail
	case f&FlagAnswered != 0:
		return OutcomeAnswered
	case dir == "inbound":
		return OutcomeMissed
	}
	return OutcomeNotAnswered
}

// NumberKey returns the key a phone number is searched by: its digits, last first, so that an
// ordered index finds a number by its trailing digits with a prefix. Every other character is
// dropped; "" has the key "".
func NumberKey(number string) string {
	b := make([]byte, 0, len(number))
	for i := len(number) - 1; i >= 0; i-- {
		if c := number[i]; c >= '0' && c <= '9' {
			b = append(b, c)
		}
	}
	return string(b)
}
