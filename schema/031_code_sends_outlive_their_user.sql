-- A count of codes sent to an address or a number outlives the erasure of the user who asked for them:
-- the erasure only takes the user's name off it (user_id), so that erasing one's own account does not
-- start that inbox's or phone's allowance again. The row still goes when it leaves its window.
GRANT UPDATE (user_id) ON code_sends TO tether_service;
