-- library fixture: a second, differently shaped schema for the task
-- generator's tests (members, books, loans). Portable SQL: runs unchanged on
-- SQLite and PostgreSQL. Edge cases on purpose: genre and membership tier
-- values in mixed case and with stray spaces, NULL cities and return dates,
-- loans that reference books and members through foreign keys, dates.

CREATE TABLE members (
    id         INTEGER PRIMARY KEY,
    name       VARCHAR(80) NOT NULL,
    email      VARCHAR(120) NOT NULL UNIQUE,
    tier       VARCHAR(20) NOT NULL,
    city       VARCHAR(40),
    joined_on  DATE NOT NULL
);

CREATE TABLE books (
    id             INTEGER PRIMARY KEY,
    title          VARCHAR(120) NOT NULL,
    author         VARCHAR(80) NOT NULL,
    genre          VARCHAR(30),
    published_year INTEGER NOT NULL,
    pages          INTEGER NOT NULL
);

CREATE TABLE loans (
    id          INTEGER PRIMARY KEY,
    book_id     INTEGER NOT NULL REFERENCES books (id),
    member_id   INTEGER NOT NULL,
    loaned_on   DATE NOT NULL,
    returned_on DATE,
    FOREIGN KEY (member_id) REFERENCES members (id)
);
