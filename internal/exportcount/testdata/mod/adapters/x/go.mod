module example.com/m/adapters/x

go 1.26

require example.com/m v0.0.0

replace example.com/m => ../..
