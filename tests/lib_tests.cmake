# Library unit and end-to-end tests.
