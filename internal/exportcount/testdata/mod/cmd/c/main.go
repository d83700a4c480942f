package main

// Exported is in a package main: not counted.
func Exported() {}

func main() {}
