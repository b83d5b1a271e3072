package config_test

import (
	"reflect"
	"testing"

	"github.com/callwire/callwire/core/config"
)

// TestSampleIsDefaults loads the sample file and checks that it states exactly the built-in
// defaults, so the sample and docs/configuration.md cannot drift from the code.
func TestSampleIsDefaults(t *testing.T) {
	c, _, err := config.Load("callwire.yaml", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := config.Defaults(); !reflect.DeepEqual(c, want) {
		t.Errorf("callwire.yaml loads as\n%+v\nwant the defaults\n%+v", c, want)
	}
}
