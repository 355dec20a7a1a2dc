package main

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// structFlags registers a flag for every field of the struct v points to,
// the fields of embedded structs included, so that a struct with YAML
// tags (isolate.Params) is decoded by flags and by a YAML file alike: the
// flag's name is the field's YAML key with dashes (or its `flag` tag), its
// usage the `help` tag, its default the field's value now. It returns each
// flag's field, for the merge of flags given on the command line over a
// file (overrideFlags).
func structFlags(f *pflag.FlagSet, v any) map[string][]int {
	fields := map[string][]int{}
	var walk func(t reflect.Type, val reflect.Value, index []int)
	walk = func(t reflect.Type, val reflect.Value, index []int) {
		for i := range t.NumField() {
			sf := t.Field(i)
			idx := append(append([]int(nil), index...), i)
			if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
				walk(sf.Type, val.Field(i), idx)
				continue
			}
			key, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			name := sf.Tag.Get("flag")
			if name == "" {
				name = strings.ReplaceAll(key, "_", "-")
			}
			if name == "" || name == "-" {
				continue
			}
			fl := f.VarPF(&fieldValue{v: val.Field(i)}, name, "", sf.Tag.Get("help"))
			if sf.Type.Kind() == reflect.Bool {
				fl.NoOptDefVal = "true"
			}
			fields[name] = idx
		}
	}
	rv := reflect.ValueOf(v).Elem()
	walk(rv.Type(), rv, nil)
	return fields
}

// overrideFlags sets, in dst, every field whose flag was given on the
// command line to its value in given (the flags' struct before a file was
// decoded over it): a flag wins over the file.
func overrideFlags[T any](f *pflag.FlagSet, fields map[string][]int, dst *T, given T) {
	f.Visit(func(fl *pflag.Flag) {
		if idx, ok := fields[fl.Name]; ok {
			reflect.ValueOf(dst).Elem().FieldByIndex(idx).Set(reflect.ValueOf(given).FieldByIndex(idx))
		}
	})
}

// fieldValue is a pflag.Value over a struct field of kind string, bool,
// int, float64, time.Duration or []string (repeatable: the first use
// replaces the default, later ones append).
type fieldValue struct {
	v       reflect.Value
	changed bool
}

var durationType = reflect.TypeFor[time.Duration]()

func (f *fieldValue) String() string {
	switch {
	case !f.v.IsValid():
		return ""
	case f.v.Type() == durationType:
		return time.Duration(f.v.Int()).String()
	case f.v.Kind() == reflect.Slice:
		if f.v.Len() == 0 {
			return ""
		}
		return fmt.Sprint(f.v.Interface())
	default:
		return fmt.Sprint(f.v.Interface())
	}
}

func (f *fieldValue) Set(s string) error {
	switch {
	case f.v.Type() == durationType:
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		f.v.SetInt(int64(d))
	case f.v.Kind() == reflect.String:
		f.v.SetString(s)
	case f.v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		f.v.SetBool(b)
	case f.v.Kind() == reflect.Int:
		n, err := strconv.ParseInt(s, 0, 0)
		if err != nil {
			return err
		}
		f.v.SetInt(n)
	case f.v.Kind() == reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		f.v.SetFloat(x)
	case f.v.Kind() == reflect.Slice && f.v.Type().Elem().Kind() == reflect.String:
		if !f.changed {
			f.v.Set(reflect.MakeSlice(f.v.Type(), 0, 1))
		}
		f.v.Set(reflect.Append(f.v, reflect.ValueOf(s).Convert(f.v.Type().Elem())))
	default:
		return fmt.Errorf("a flag of type %s is not supported", f.v.Type())
	}
	f.changed = true
	return nil
}

func (f *fieldValue) Type() string {
	switch {
	case f.v.Type() == durationType:
		return "duration"
	case f.v.Kind() == reflect.Slice:
		return "stringArray"
	case f.v.Kind() == reflect.String:
		return "string"
	default:
		return f.v.Kind().String()
	}
}
