//! End-to-end tests across stages live in tests/e2e/.
