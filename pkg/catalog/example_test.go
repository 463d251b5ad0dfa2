package catalog_test

import (
	"errors"
	"fmt"

	"github.com/toolbus/toolbus/pkg/catalog"
)

func Example() {
	// Two servers' tools, under the names a model is shown.
	servers := map[string][]catalog.Tool{}
	for server, tools := range map[string][]string{"tickets": {"create", "get_status"}, "jira": {"create"}} {
		for _, t := range tools {
			servers[server] = append(servers[server], catalog.Tool{Name: catalog.ExposedName(server, "", t), Remote: t})
		}
	}
	c := catalog.New(servers, nil)
	for _, name := range []string{"tickets__create", "mcp__jira__create", "tickets::get_status", "get_status", "create", "delete"} {
		t, err := c.Resolve(name)
		switch {
		case errors.Is(err, catalog.ErrAmbiguous):
			fmt.Printf("%-20s ambiguous\n", name)
		case err != nil:
			fmt.Printf("%-20s %v\n", name, err)
		default:
			fmt.Printf("%-20s %s on %s\n", name, t.Remote, t.Server)
		}
	}
	// Output:
	// tickets__create      create on tickets
	// mcp__jira__create    create on jira
	// tickets::get_status  get_status on tickets
	// get_status           get_status on tickets
	// create               ambiguous
	// delete               unknown tool: no server has a tool called "delete"
}

func ExampleVendorNames() {
	names := []string{"geometry.solve_circle_area", "add"}
	alias := catalog.VendorNames(names)
	fmt.Println(alias["geometry.solve_circle_area"], alias["add"])
	fmt.Println(catalog.Unalias("geometry_solve_circle_area", names))
	// Output:
	// geometry_solve_circle_area add
	// geometry.solve_circle_area true
}
