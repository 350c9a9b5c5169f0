package broker

import (
	"reflect"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every kmsg response names its error codes ErrorCode: at the top, and in each topic,
// partition, group or member entry below it. eachErrorCode finds them all by the response's
// shape, so a new API key is counted without a line here; the walk of a type is planned once
// (errorPlans) and skips every field that cannot hold an ErrorCode, record bytes included.

// errorPlan is where a struct type's error codes are: its own ErrorCode field (index, or -1)
// and the fields (structs, pointers to them, slices of them) whose types hold some.
type errorPlan struct {
	code  int
	inner []int
}

var errorPlans sync.Map // reflect.Type (a struct) → *errorPlan; nil plan: nothing to find

// planFor returns t's plan, nil when no field of t, however deep, is an ErrorCode.
func planFor(t reflect.Type, visiting map[reflect.Type]bool) *errorPlan {
	if p, ok := errorPlans.Load(t); ok {
		return p.(*errorPlan)
	}
	if visiting[t] {
		return nil // a recursive type: kmsg has none, and this keeps the walk finite
	}
	visiting[t] = true
	p := &errorPlan{code: -1}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 {
			p.code = i
			continue
		}
		if inner := structOf(f.Type); inner != nil && planFor(inner, visiting) != nil {
			p.inner = append(p.inner, i)
		}
	}
	if p.code < 0 && len(p.inner) == 0 {
		p = nil
	}
	errorPlans.Store(t, p)
	return p
}

// structOf is the struct type a field of type t leads to (t itself, *t, []t or []*t), or nil.
func structOf(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	return t
}

// eachErrorCode calls fn with every non-zero error code resp holds.
func eachErrorCode(resp kmsg.Response, fn func(code int16)) {
	v := reflect.ValueOf(resp)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() == reflect.Struct {
		walkErrors(v, fn)
	}
}

func walkErrors(v reflect.Value, fn func(int16)) {
	p := planFor(v.Type(), map[reflect.Type]bool{})
	if p == nil {
		return
	}
	if p.code >= 0 {
		if c := int16(v.Field(p.code).Int()); c != 0 {
			fn(c)
		}
	}
	for _, i := range p.inner {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Struct:
			walkErrors(f, fn)
		case reflect.Pointer:
			if !f.IsNil() {
				walkErrors(f.Elem(), fn)
			}
		case reflect.Slice:
			for j := 0; j < f.Len(); j++ {
				e := f.Index(j)
				if e.Kind() == reflect.Pointer {
					if e.IsNil() {
						continue
					}
					e = e.Elem()
				}
				walkErrors(e, fn)
			}
		}
	}
}

// errorName is the Kafka name of an error code (NOT_LEADER_OR_FOLLOWER), or its number for
// a code franz-go does not know (its ErrorForCode would call that UNKNOWN_SERVER_ERROR).
func errorName(code int16) string {
	if ke := kerr.TypedErrorForCode(code); ke != nil && (ke.Code == code) {
		return ke.Message
	}
	return strconv.Itoa(int(code))
}
