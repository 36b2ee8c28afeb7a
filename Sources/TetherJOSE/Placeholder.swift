// TetherJOSE
