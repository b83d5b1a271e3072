package confload

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// DecodeJSON decodes a translator's configuration block (a JSON object) into dst, a pointer to a
// struct whose fields carry json tags. Unlike encoding/json it reports every key dst has no field
// for, each as its own error naming the key's path ("listen", "hold.windw") and the nearest
// known key when one is close, together with any type errors, joined with errors.Join so that a
// caller can join them with its own validation problems. Keys of embedded structs count as the
// embedding struct's own, as encoding/json promotes them; keys inside maps are the map's own
// and are not checked. An empty or null block leaves dst as it is.
func DecodeJSON(raw json.RawMessage, dst any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return fmt.Errorf("configuration is not valid JSON: %w", err)
	}
	if _, ok := tree.(map[string]any); !ok {
		return errors.New("configuration must be an object of keys")
	}
	t := reflect.TypeOf(dst)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("confload.DecodeJSON: destination %T is not a pointer to a struct", dst)
	}
	var errs []error
	unknownKeys(tree, t.Elem(), "", &errs)
	if err := json.Unmarshal(raw, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			errs = append(errs, fmt.Errorf("%s: must be %s, not %s", te.Field, kindWord(te.Type), te.Value))
		} else {
			errs = append(errs, fmt.Errorf("configuration: %w", err))
		}
	}
	return errors.Join(errs...)
}

// unknownKeys appends an error for each key of v (decoded JSON) that struct type t has no field for.
func unknownKeys(v any, t reflect.Type, path string, errs *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return // a type error, reported by json.Unmarshal
		}
		fields := jsonFields(t)
		known := make([]string, 0, len(fields))
		for k := range fields {
			known = append(known, k)
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				// encoding/json matches keys without regard to case; so does this check.
				for name, f := range fields {
					if strings.EqualFold(name, k) {
						ft, ok = f, true
						break
					}
				}
			}
			if !ok {
				msg := fmt.Errorf("%s: unknown key", join(path, k))
				if near := nearest(k, known); near != "" {
					msg = fmt.Errorf("%s: unknown key; did you mean %s?", join(path, k), join(path, near))
				}
				*errs = append(*errs, msg)
				continue
			}
			unknownKeys(obj[k], ft, join(path, k), errs)
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			return
		}
		for i, e := range arr {
			unknownKeys(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	}
}

// jsonFields returns the JSON keys of struct type t (with the fields of embedded structs
// promoted) and each key's field type.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, taken := out[k]; !taken {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// kindWord names what a Go type expects in JSON terms.
func kindWord(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}
