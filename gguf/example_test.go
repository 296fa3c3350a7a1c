package gguf_test

import (
	"fmt"
	"log"

	"github.com/mcprl/mcprl/gguf"
)

func ExampleOpen() {
	r, err := gguf.Open("testdata/types.gguf")
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	arch, _ := r.String("general.architecture")
	fmt.Println("architecture:", arch)
	t, _ := r.Tensor("q4_1")
	fmt.Println(t.Name, t.Type, "dims", t.Dims, "shape", t.Shape())
	v, err := r.Float32("q4_1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(v), "values")
	// Output:
	// architecture: llama
	// q4_1 Q4_1 dims [32 5] shape [5 32]
	// 160 values
}
