-- oddities fixture data (hand-written).
INSERT INTO employees (id, full_name, dept, manager_id, hired, salary) VALUES
(1, 'Maeve O''Brien', 'R&D', NULL, '2018-03-01', 9100.50),
(2, 'Tomas Ruiz', 'Sales', 1, '2019-07-15', 5200.00),
(3, 'Aiko Mori', ' sales', 1, '2020-01-20', 5300.25),
(4, 'Lars Berg', 'R&D', 1, '2020-11-02', 7000.00),
(5, 'Nadia Azar', 'SALES', 2, '2021-05-09', 4800.75),
(6, 'Pavel Dvorak', NULL, 4, '2022-02-14', 6100.00),
(7, 'Zoe Quinn', 'Support', 2, '2022-08-30', 4100.00),
(8, 'Ibrahim Sall', 'Support', 7, '2023-04-11', 3900.40),
(9, 'Eva Lund', 'R&D', 4, '2024-06-03', 6600.00);

INSERT INTO "order" (id, employee_id, amount, note) VALUES
(1, 2, 120.5, 'first deal'),
(2, 2, 80.25, NULL),
(3, 3, 310.0, 'O''Brien''s referral'),
(4, 5, 45.75, NULL),
(5, 5, 99.99, 'repeat'),
(6, 3, 15.0, 'small & quick'),
(7, 7, 250.0, NULL);

INSERT INTO audit_log (logged_at, action) VALUES
('2024-01-02 10:00:00', 'login'),
('2024-01-02 10:05:00', 'export'),
('2024-02-10 08:30:00', 'Login'),
('2024-03-15 17:45:00', 'logout'),
('2024-03-16 09:00:00', 'login'),
('2024-05-01 12:00:00', 'export');
