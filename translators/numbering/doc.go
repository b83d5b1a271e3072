// Package numbering is what every translator shares about a clinic's telephone numbers: the
// clinic's own numbers, the country its dialled numbers default to, how a number, extension or
// SIP/tel URI a translator saw becomes an [event.Party], and which locations (workstation groups)
// a number's calls wake.
//
// Numbers become E.164 through github.com/nyaruka/phonenumbers (Google's libphonenumber metadata),
// never through hand-written numbering rules. This package only takes apart what surrounds a
// number (URI schemes and parameters, visual separators, PBX outside-line prefixes, star codes)
// before handing the digits to the library, and asks the library whether the result is a valid
// number. What cannot be classified is kept, verbatim, in the party's URI with kind unknown.
//
// A translator embeds [Config] in its own configuration (its keys are numbers, default_country,
// locations, dial_prefixes and extension_max_digits), builds a [Plan] with [New] once, and calls
// [Plan.Classify] for every party it sees. A Plan is safe for concurrent use. The rules are
// documented for operators in docs/sip-observer.md, section "Numbers".
package numbering
