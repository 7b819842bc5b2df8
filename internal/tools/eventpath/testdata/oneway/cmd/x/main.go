package main

import "github.com/streamer/streamer/stream"

func main() { stream.New().Run() }
