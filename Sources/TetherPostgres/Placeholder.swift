// TetherPostgres
