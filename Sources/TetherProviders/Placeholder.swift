// TetherProviders
