-- SMS codes are limited per phone number as well as per user: codes sent are
-- found through the phone factors they went to, by these two indexes.
CREATE INDEX events_mfa_factor_phone ON events ((data -> 'personal' ->> 'phoneNumber'))
    WHERE type = 'MFAFactorEnrolled';
CREATE INDEX events_mfa_code_sent ON events ((data ->> 'factorId'), occurred_at)
    WHERE type = 'MFACodeSent';
