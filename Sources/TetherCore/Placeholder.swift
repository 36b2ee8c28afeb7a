// TetherCore
