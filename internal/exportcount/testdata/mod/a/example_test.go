package a_test

import "example.com/m/a"

func ExampleExampled() { a.Exampled() }
