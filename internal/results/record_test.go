package results

import "testing"

func TestOperationAddCounts(t *testing.T) {
	var o Operation
	o.AddCounts(&Operation{Count: 3, Bytes: 30, Errors: map[string]int64{"timeout": 1}})
	o.AddCounts(&Operation{Count: 2, Bytes: 20, Errors: map[string]int64{"timeout": 2, "reset": 1}})
	o.AddCounts(&Operation{Count: 1})
	if o.Count != 6 || o.Bytes != 50 || o.Errors["timeout"] != 3 || o.Errors["reset"] != 1 || len(o.Errors) != 2 {
		t.Errorf("merged %+v", o)
	}
}
