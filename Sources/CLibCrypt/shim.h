#ifndef TETHER_CLIBCRYPT_SHIM_H
#define TETHER_CLIBCRYPT_SHIM_H
// libxcrypt (Debian's libcrypt-dev): crypt_r, for checking bcrypt hashes imported from elsewhere.
#include <crypt.h>
#endif
