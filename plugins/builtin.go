package plugins

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/callwire/callwire/sdk/translator"
)

// BuiltinSubcommand is the hidden subcommand of the callwire binary that serves a built-in
// translator: `callwire translator <name>`. BuiltinCommand builds it; the binary's command line
// handles it by calling ServeBuiltin.
const BuiltinSubcommand = "translator"

// ExecutablePrefix starts the file name of every third-party translator:
// callwire-translator-<name>.
const ExecutablePrefix = "callwire-translator-"

// ServeBuiltin serves the built-in translator called name, taken from builtins, with
// translator.Serve. The callwire binary calls it for `callwire translator <name>`. It returns an
// error, before serving anything, when builtins has no translator by that name.
func ServeBuiltin(name string, builtins map[string]translator.Translator) error {
	t, ok := builtins[name]
	if !ok || t == nil {
		names := strings.Join(slices.Sorted(maps.Keys(builtins)), ", ")
		if names == "" {
			names = "none"
		}
		return fmt.Errorf("no built-in translator %q (built in: %s)", name, names)
	}
	translator.Serve(t)
	return nil
}

// BuiltinCommand returns the command that launches the built-in translator called name: this
// executable, re-executed as `<executable> translator <name>`. Use it as TranslatorSpec.Command.
func BuiltinCommand(name string) ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("built-in translator %q: find this executable: %w", name, err)
	}
	return []string{exe, BuiltinSubcommand, name}, nil
}

// ExternalCommand returns the command that launches the third-party translator called name:
// the executable callwire-translator-<name>, looked up on PATH each time it is launched (so a
// translator installed after the agent started is found on its next restart).
func ExternalCommand(name string) []string {
	return []string{ExecutablePrefix + name}
}
