package confload

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a span of time in a JSON configuration block (a translator's): Go duration text
// ("90s", "4h") or a number of seconds. Convert with time.Duration(d).
type Duration time.Duration

// UnmarshalJSON reads "90s"-style text or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration such as \"90s\" or \"4h\"", s)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("%s is not a duration such as \"90s\" or a number of seconds", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration as Go duration text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }
