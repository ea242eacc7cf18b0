package roster

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestRoles(t *testing.T) {
	for _, tc := range []struct {
		role Role
		name string
	}{{RoleObserver, "observer"}, {RoleMember, "member"}, {RoleOperator, "operator"}, {RoleAdmin, "admin"}} {
		if tc.role.String() != tc.name {
			t.Errorf("%d.String() = %q", tc.role, tc.role.String())
		}
		r, err := ParseRole(tc.name)
		if err != nil || r != tc.role {
			t.Errorf("ParseRole(%q) = %v, %v", tc.name, r, err)
		}
		b, err := json.Marshal(tc.role)
		if err != nil || string(b) != `"`+tc.name+`"` {
			t.Errorf("json %s, %v", b, err)
		}
		var back Role
		if err := json.Unmarshal(b, &back); err != nil || back != tc.role {
			t.Errorf("json round trip %v, %v", back, err)
		}
	}
	for _, bad := range []string{"", "Admin", "root", "4"} {
		if _, err := ParseRole(bad); !errors.Is(err, ErrUnknownRole) {
			t.Errorf("ParseRole(%q): %v", bad, err)
		}
	}
	if Role(0).Valid() || Role(5).Valid() || Role(9).String() != "role(9)" {
		t.Error("invalid roles")
	}
	if _, err := Role(0).MarshalText(); err == nil {
		t.Error("MarshalText of role 0")
	}
	if !RoleAdmin.AtLeast(RoleOperator) || !RoleMember.AtLeast(RoleMember) || RoleObserver.AtLeast(RoleMember) {
		t.Error("AtLeast")
	}
	if !(RoleObserver < RoleMember && RoleMember < RoleOperator && RoleOperator < RoleAdmin) {
		t.Error("order")
	}
}
