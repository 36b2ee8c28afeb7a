// TetherAPI
