#ifndef TETHER_COPENSSL_SHIM_H
#define TETHER_COPENSSL_SHIM_H
// Only the OpenSSL 3 EVP / OSSL_PARAM surface: deprecated low-level APIs are hidden.
#define OPENSSL_API_COMPAT 30000
#define OPENSSL_NO_DEPRECATED 1
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>
#include <openssl/kdf.h>
#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

static const int COpenSSL_EVP_PKEY_PUBLIC_KEY = EVP_PKEY_PUBLIC_KEY;
static const int COpenSSL_EVP_PKEY_KEYPAIR = EVP_PKEY_KEYPAIR;

// Swift cannot call the variadic EVP_PKEY_Q_keygen: one fixed-arity wrapper per key type.
static inline EVP_PKEY *COpenSSL_EVP_PKEY_Q_keygen_EC(const char *curve) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "EC", curve);
}
static inline EVP_PKEY *COpenSSL_EVP_PKEY_Q_keygen_RSA(size_t bits) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "RSA", bits);
}
static inline EVP_PKEY *COpenSSL_EVP_PKEY_Q_keygen_ED25519(void) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
}

// BIO_get_mem_data is a macro around BIO_ctrl with a pointer cast Swift cannot import.
static inline long COpenSSL_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

#endif
