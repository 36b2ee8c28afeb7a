// TetherCrypto
