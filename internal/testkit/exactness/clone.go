package exactness

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/ratewarden/ratewarden/internal/algorithms"
)

// cloneState returns a deep copy of st, a pointer to one of the states of
// internal/algorithms: structs of numbers, arrays and slices. The states
// have no Clone method, so it copies their fields by reflection, unexported
// ones too, giving every slice an array of its own; it panics on a field it
// cannot copy (a map, a pointer), which TestCloneState would show first.
func cloneState(st algorithms.State) algorithms.State {
	v := reflect.ValueOf(st)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("exactness: cannot clone a %T", st))
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	deepen(c.Elem())
	return c.Interface().(algorithms.State)
}

// deepen gives every slice within v, an addressable value, an array of its
// own.
func deepen(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			deepen(v.Field(i))
		}
	case reflect.Array:
		for i := range v.Len() {
			deepen(v.Index(i))
		}
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		f := reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
		fresh := reflect.MakeSlice(v.Type(), f.Len(), f.Len())
		reflect.Copy(fresh, f)
		for i := range fresh.Len() {
			deepen(fresh.Index(i))
		}
		f.Set(fresh)
	case reflect.Map, reflect.Pointer, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		panic(fmt.Sprintf("exactness: cannot clone a state holding a %s", v.Type()))
	}
}
