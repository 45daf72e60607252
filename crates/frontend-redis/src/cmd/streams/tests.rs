//! Parse tests: requests in raw RESP bytes, as the door reads them.
